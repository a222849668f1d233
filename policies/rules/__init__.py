"""One module per rule; the registry in ``policies.registry`` lists them explicitly."""
