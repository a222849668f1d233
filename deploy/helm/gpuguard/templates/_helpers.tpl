{{/* Names: the release's objects are named like the kustomize install's when the release is
named gpuguard (`helm install gpuguard …` gives gpuguard, gpuguard-tls, …). */}}
{{- define "gpuguard.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpuguard.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "gpuguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpuguard.labels" -}}
{{ include "gpuguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The webhook pods: the selector of the Deployment, Service, PDB and NetworkPolicy. */}}
{{- define "gpuguard.podSelectorLabels" -}}
{{ include "gpuguard.selectorLabels" . }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "gpuguard.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* Exempt namespaces: config.exemptNamespaces and the release namespace, sorted, as a JSON list.
The same list goes into the policy config and into the webhooks' namespaceSelector. */}}
{{- define "gpuguard.exemptNamespaceList" -}}
{{- $names := list .Release.Namespace }}
{{- range ((.Values.config | default dict).exemptNamespaces | default list) }}
{{- $names = append $names (toString .) }}
{{- end }}
{{- $names | uniq | sortAlpha | toJson }}
{{- end }}

{{- define "gpuguard.exemptNamespaces" -}}
{{- include "gpuguard.exemptNamespaceList" . }}
{{- end }}

{{/* The policy config as the pods read it: config, with the exempt namespaces above. */}}
{{- define "gpuguard.policy" -}}
{{- $policy := deepCopy (.Values.config | default dict) }}
{{- $_ := set $policy "exemptNamespaces" (include "gpuguard.exemptNamespaceList" . | fromJsonArray) }}
{{- toYaml $policy }}
{{- end }}

{{/* Extra GPU resource names of the config in the gpu-workload matchCondition: the names the
vendor prefixes do not cover, as webhook/configuration.py writes them. */}}
{{- define "gpuguard.extraGpuNames" -}}
{{- $prefixes := .prefixes }}
{{- $extra := list }}
{{- range $name := (.names | default list) }}
{{- $name = toString $name }}
{{- $covered := false }}
{{- range $prefixes }}{{ if hasPrefix . $name }}{{ $covered = true }}{{ end }}{{ end }}
{{- if not $covered }}
{{- if or (contains "'" $name) (contains "\\" $name) }}
{{- fail (printf "config.gpuResourceNames: %q cannot be quoted in CEL" $name) }}
{{- end }}
{{- $extra = append $extra (printf "'%s'" $name) }}
{{- end }}
{{- end }}
{{- if $extra }} || n in [{{ join ", " $extra }}]{{ end }}
{{- end }}

{{/* Checks values.schema.json cannot express; called by the webhooks template. */}}
{{- define "gpuguard.checkValues" -}}
{{- if (.Values.config | default dict).podTemplatePaths }}
{{- fail "config.podTemplatePaths: the chart's webhook rules list gpuguard's built-in kinds only, so objects of your own kinds would never reach the webhook; install with deploy/ and `gpuguard webhook-config --config` (see the README) for kinds of your own" }}
{{- end }}
{{- if and (eq .Values.certificates.mode "secret") (not .Values.certificates.secret.name) }}
{{- fail "certificates.secret.name: certificates.mode secret needs the name of an existing kubernetes.io/tls Secret in the release namespace" }}
{{- end }}
{{- if eq .Values.certificates.mode "secret" }}
{{- $ca := .Values.certificates.secret.caBundle | trim }}
{{- if not $ca }}
{{- fail "certificates.secret.caBundle: certificates.mode secret needs the CA certificate that signed the Secret's certificate (PEM, or base64 of the PEM), for the webhooks' caBundle" }}
{{- end }}
{{- if not (or (hasPrefix "-----BEGIN CERTIFICATE-----" $ca) (hasPrefix "-----BEGIN CERTIFICATE-----" ($ca | b64dec))) }}
{{- fail "certificates.secret.caBundle: neither a PEM certificate (-----BEGIN CERTIFICATE-----) nor base64 of one" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Secret the pods mount at /tls. */}}
{{- define "gpuguard.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "secret" }}
{{- .Values.certificates.secret.name }}
{{- else }}
{{- printf "%s-tls" (include "gpuguard.fullname" .) }}
{{- end }}
{{- end }}

{{- define "gpuguard.servingCertificateName" -}}
{{- printf "%s-serving" (include "gpuguard.fullname" .) }}
{{- end }}

{{/* The DNS names the API server may dial: NAME.NS.svc is the one it uses for a service reference. */}}
{{- define "gpuguard.serviceDNSNames" -}}
{{- $svc := include "gpuguard.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson }}
{{- end }}

{{/* certificates.mode self: the CA and serving certificate, as a dict with ca.crt, tls.crt,
tls.key (PEM), notAfter (RFC 3339) and caBundle (PEM). The Secret of an earlier release is kept
unless it expires within renewBeforeDays; otherwise a new CA and certificate are generated, and
the caBundle trusts the previous CA too, so the pods' certificate stays trusted until they have
reloaded the new one (the next upgrade drops it). The result is memoised in .Values so the
Secret and both webhook configurations of one render agree. */}}
{{- define "gpuguard.selfSignedTLS" -}}
{{- if not (hasKey .Values "__gpuguardSelfSignedTLS") }}
{{- $tls := dict }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "gpuguard.tlsSecretName" .) }}
{{- $data := (get ($existing | default dict) "data") | default dict }}
{{- $annotations := (get ((get ($existing | default dict) "metadata") | default dict) "annotations") | default dict }}
{{- $notAfter := get $annotations "gpuguard.io/not-after" }}
{{- if and (get $data "ca.crt") (get $data "tls.crt") (get $data "tls.key") $notAfter }}
{{- $renewAt := sub ((toDate "2006-01-02T15:04:05Z07:00" $notAfter) | unixEpoch | atoi) (mul (int .Values.certificates.self.renewBeforeDays) 86400) }}
{{- if lt (now | unixEpoch | atoi) $renewAt }}
{{- $ca := get $data "ca.crt" | b64dec }}
{{- $tls = dict "ca.crt" $ca "tls.crt" (get $data "tls.crt" | b64dec) "tls.key" (get $data "tls.key" | b64dec) "notAfter" $notAfter "caBundle" $ca }}
{{- end }}
{{- end }}
{{- if not $tls }}
{{- $days := int .Values.certificates.self.validityDays }}
{{- $ca := genCA (printf "%s-ca" (include "gpuguard.fullname" .)) $days }}
{{- $names := include "gpuguard.serviceDNSNames" . | fromJsonArray }}
{{- $cert := genSignedCert (printf "%s.%s.svc" (include "gpuguard.fullname" .) .Release.Namespace) nil $names $days $ca }}
{{- $until := (now | dateModify (printf "+%dh" (mul $days 24)) | date "2006-01-02T15:04:05Z07:00") }}
{{- $bundle := $ca.Cert }}
{{- with get $data "ca.crt" }}
{{- $bundle = printf "%s\n%s\n" ($ca.Cert | trim) (b64dec . | trim) }}
{{- end }}
{{- $tls = dict "ca.crt" $ca.Cert "tls.crt" $cert.Cert "tls.key" $cert.Key "notAfter" $until "caBundle" $bundle }}
{{- end }}
{{- $_ := set .Values "__gpuguardSelfSignedTLS" $tls }}
{{- end }}
{{- get .Values "__gpuguardSelfSignedTLS" | toJson }}
{{- end }}

{{/* clientConfig.caBundle of both webhooks (none with cert-manager: its CA injector writes it). */}}
{{- define "gpuguard.caBundle" -}}
{{- if eq .Values.certificates.mode "self" }}
caBundle: {{ get (include "gpuguard.selfSignedTLS" . | fromJson) "caBundle" | b64enc }}
{{- else if eq .Values.certificates.mode "secret" }}
{{- $ca := .Values.certificates.secret.caBundle | trim }}
caBundle: {{ if hasPrefix "-----BEGIN" $ca }}{{ printf "%s\n" $ca | b64enc }}{{ else }}{{ $ca }}{{ end }}
{{- end }}
{{- end }}

{{- define "gpuguard.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "gpuguard.servingCertificateName" .) | quote }}
{{- end }}
{{- end }}
