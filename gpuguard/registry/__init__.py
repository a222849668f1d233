"""Read image configs from OCI registries, for every face (neutral: no face imports another).

* ``reference``: image names normalised as Docker does;
* ``auth``: credentials from auth files, ``WWW-Authenticate`` challenges;
* ``client``: the verified, bounded OCI Distribution client (httpx);
* ``cache``: disk (CLI) and bounded memory (webhook) caches;
* ``resolver``: image → ``ImageLookup`` through the cache, never raising;
* ``facts``: the ``ImageFacts`` view faces give the engine, and what to look up;
* ``cli``: flags and a synchronous prefetch for command-line faces;
* ``service``: asynchronous lookups within a per-review budget for the webhook.
"""
