{{/* The release's object names: the release name, with the chart's unless it already holds it. */}}
{{- define "edge-ccm.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selects the release's pods; never changes across upgrades (a selector is immutable). */}}
{{- define "edge-ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "edge-ccm.labels" -}}
{{ include "edge-ccm.selectorLabels" . }}
app.kubernetes.io/component: cloud-controller-manager
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "edge-ccm.serviceAccountName" -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}

{{/* The user name edge-ccm's own service account authenticates as. */}}
{{- define "edge-ccm.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "edge-ccm.serviceAccountName" . }}
{{- end -}}

{{/*
--cloud-config: the file of the one provider, or NAME=FILE for each of several (the first's is
cloudConfig.key, each other's NAME.yaml), as docs/hybrid-clusters.md gives them.
*/}}
{{- define "edge-ccm.cloudConfigFlag" -}}
{{- $providers := splitList "," .Values.provider -}}
{{- if eq (len $providers) 1 -}}
/etc/edge-ccm/{{ .Values.cloudConfig.key }}
{{- else -}}
{{- $files := list (printf "%s=/etc/edge-ccm/%s" (first $providers) .Values.cloudConfig.key) -}}
{{- range rest $providers -}}
{{- $files = append $files (printf "%s=/etc/edge-ccm/%s.yaml" . .) -}}
{{- end -}}
{{- join "," $files -}}
{{- end -}}
{{- end -}}

{{/*
Several providers: each named once; cloudConfig.others holds the configs of those after the first,
all of them when the chart makes the ConfigMap, and no key of theirs is cloudConfig.key.
*/}}
{{- define "edge-ccm.validateProviders" -}}
{{- $providers := splitList "," .Values.provider -}}
{{- if ne (len $providers) (len (uniq $providers)) -}}
{{- fail (printf "provider=%s names a provider twice" .Values.provider) -}}
{{- end -}}
{{- range $name, $_ := .Values.cloudConfig.others -}}
{{- if not (has $name (rest $providers)) -}}
{{- fail (printf "cloudConfig.others.%s: %s is not a provider after the first in provider=%s (the first one's config is cloudConfig.content)" $name $name $.Values.provider) -}}
{{- end -}}
{{- if eq (printf "%s.yaml" $name) $.Values.cloudConfig.key -}}
{{- fail (printf "cloudConfig.key=%s is also the key of cloudConfig.others.%s" $.Values.cloudConfig.key $name) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.cloudConfig.others (not .Values.cloudConfig.content) -}}
{{- fail "cloudConfig.others without cloudConfig.content: give the first provider's config in the values too (or all of them in existingConfigMap)" -}}
{{- end -}}
{{- if .Values.cloudConfig.content -}}
{{- range rest $providers -}}
{{- if not (hasKey $.Values.cloudConfig.others .) -}}
{{- fail (printf "provider=%s: cloudConfig.others.%s is missing (each provider after the first needs its config)" $.Values.provider .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "edge-ccm.configMapName" -}}
{{- .Values.cloudConfig.existingConfigMap | default (printf "%s-cloud-config" (include "edge-ccm.fullname" .)) -}}
{{- end -}}

{{- define "edge-ccm.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "edge-ccm.fullname" .)) -}}
{{- end -}}

{{/*
Where the Secret's files are mounted and CREDENTIALS_DIRECTORY points, in the controller and the
speaker alike: one cloud config's `${CREDENTIALS_DIRECTORY}/NAME` then names the same file in both.
*/}}
{{- define "edge-ccm.credentialsDirectory" -}}
/run/secrets/edge-ccm
{{- end -}}

{{- define "edge-ccm.metricsTokenSecretName" -}}
{{- .Values.metrics.tokenSecret.existingSecret | default (printf "%s-metrics-token" (include "edge-ccm.fullname" .)) -}}
{{- end -}}

{{- define "edge-ccm.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
Where the kubelet probes: the bind address when it is one address of the host network (a pod
bound to 127.0.0.1 answers nowhere else); otherwise the pod's IP, the kubelet's default.
*/}}
{{- define "edge-ccm.probeHost" -}}
{{- $bind := .Values.server.bindAddress -}}
{{- if and .Values.hostNetwork (not (has $bind (list "podIP" "0.0.0.0" "::"))) -}}
{{ $bind }}
{{- end -}}
{{- end -}}

{{/* The scrape endpoint's TLS and bearer token, shared by the PodMonitor and the ServiceMonitor. */}}
{{- define "edge-ccm.scrapeEndpoint" -}}
path: /metrics
scheme: https
interval: {{ .Values.metrics.interval }}
{{- with .Values.metrics.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
tlsConfig:
  insecureSkipVerify: {{ .Values.metrics.insecureSkipVerify }}
# The job name the shipped alert rules and dashboard select.
relabelings:
  - targetLabel: job
    replacement: {{ .Values.metrics.jobName }}
{{- if include "edge-ccm.metricsTokenSecret" . }}
authorization:
  type: Bearer
  credentials:
    name: {{ include "edge-ccm.metricsTokenSecretName" . }}
    key: token
{{- end }}
{{- end -}}

{{/* Non-empty when the monitors send the token from metrics.tokenSecret. */}}
{{- define "edge-ccm.metricsTokenSecret" -}}
{{- if or .Values.metrics.tokenSecret.create .Values.metrics.tokenSecret.existingSecret }}true{{ end -}}
{{- end -}}

{{/* Refuses values that would deploy something that cannot work, naming the value. */}}
{{- define "edge-ccm.validate" -}}
{{- $pods := ternary 2 (int .Values.replicas) (eq .Values.kind "DaemonSet") -}}
{{- if and (gt $pods 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "leaderElection.enabled=false with %s: more than one pod would run the controllers at once (set replicas: 1 or enable leader election)" (ternary "kind: DaemonSet" (printf "replicas: %d" $pods) (eq .Values.kind "DaemonSet"))) -}}
{{- end -}}
{{- if and (not .Values.hostNetwork) (hasPrefix "127." .Values.server.bindAddress) -}}
{{- fail (printf "server.bindAddress=%s with hostNetwork=false: the pod's loopback is reachable by nobody, not even the kubelet's probes (use podIP or 0.0.0.0)" .Values.server.bindAddress) -}}
{{- end -}}
{{- if and (or .Values.metrics.podMonitor.enabled .Values.metrics.serviceMonitor.enabled) (hasPrefix "127." .Values.server.bindAddress) -}}
{{- fail (printf "metrics.podMonitor/serviceMonitor with server.bindAddress=%s: Prometheus cannot scrape a loopback address (use podIP or 0.0.0.0)" .Values.server.bindAddress) -}}
{{- end -}}
{{- if and .Values.cloudConfig.content .Values.cloudConfig.existingConfigMap -}}
{{- fail "cloudConfig.content and cloudConfig.existingConfigMap are both set: give the config one way" -}}
{{- end -}}
{{- include "edge-ccm.validateProviders" . -}}
{{- if and .Values.secrets.files .Values.secrets.existingSecret -}}
{{- fail "secrets.files and secrets.existingSecret are both set: give the files one way" -}}
{{- end -}}
{{- if and .Values.metrics.podMonitor.enabled (not (include "edge-ccm.metricsTokenSecret" .)) -}}
{{- fail "metrics.podMonitor.enabled needs metrics.tokenSecret (create, or existingSecret): a PodMonitor cannot send Prometheus's own token, and /metrics refuses a scrape without one" -}}
{{- end -}}
{{- if and .Values.metrics.tokenSecret.create .Values.metrics.tokenSecret.existingSecret -}}
{{- fail "metrics.tokenSecret.create and metrics.tokenSecret.existingSecret are both set" -}}
{{- end -}}
{{- /* Only keys of secrets.files can be checked here: an existingSecret (or one made by hand) is not read at render time. */ -}}
{{- if and .Values.speaker.enabled .Values.secrets.files -}}
{{- range .Values.speaker.credentials -}}
{{- if not (hasKey $.Values.secrets.files .) -}}
{{- fail (printf "speaker.credentials: %q is not a key of secrets.files (%s): the speaker would be given a file that does not exist" . (keys $.Values.secrets.files | sortAlpha | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.speaker.enabled .Values.cloudConfig.content -}}
{{- include "edge-ccm.validateSpeakerAnnounceFrom" . -}}
{{- include "edge-ccm.validateSpeakerPasswordFiles" . -}}
{{- end -}}
{{- end -}}

{{/*
With the speaker running and a bgp section in the config, who announces the load-balancer
addresses is the operator's explicit choice: edge-ccm's own default (leader) keeps a dead node a
next hop until its Node turns NotReady (the node-monitor grace period, about 50 s), whereas the
speakers (nodes) withdraw it within a second. The chart does not rewrite the config (comments and
line numbers are the operator's), so it refuses to guess.
*/}}
{{- define "edge-ccm.validateSpeakerAnnounceFrom" -}}
{{- $bgp := get (fromYaml .Values.cloudConfig.content) "bgp" -}}
{{- if kindIs "map" $bgp -}}
{{- $lb := get $bgp "loadBalancers" -}}
{{- if not (and (kindIs "map" $lb) (hasKey $lb "announceFrom")) -}}
{{- fail "cloudConfig.content has a bgp section and speaker.enabled is true: set bgp.loadBalancers.announceFrom: nodes (every node's speaker announces its own path and a dead node leaves the routers within a second; recommended with the speaker) or leader (the leader announces every Ready node: a dead node stays a next hop for the node-monitor grace period, about 50 s); docs/networking/bgp.md#node-liveness-per-node-sessions-with-bfd" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
With the config in the values and bgp.loadBalancers.announceFrom: nodes, every speaker reads each
peer's passwordFile: one under ${CREDENTIALS_DIRECTORY} that speaker.credentials does not list
would stop every speaker at start. Anything malformed is left to edge-ccm's own config check.
*/}}
{{- define "edge-ccm.validateSpeakerPasswordFiles" -}}
{{- $bgp := get (fromYaml .Values.cloudConfig.content) "bgp" -}}
{{- if kindIs "map" $bgp -}}
{{- $lb := get $bgp "loadBalancers" -}}
{{- $peers := get $bgp "peers" -}}
{{- if and (kindIs "map" $lb) (eq (toString (get $lb "announceFrom")) "nodes") (kindIs "slice" $peers) -}}
{{- range $i, $peer := $peers -}}
{{- if kindIs "map" $peer -}}
{{- $file := toString (get $peer "passwordFile") -}}
{{- $name := trimPrefix "${CREDENTIALS_DIRECTORY}/" $file -}}
{{- if and (hasPrefix "${CREDENTIALS_DIRECTORY}/" $file) (not (has $name $.Values.speaker.credentials)) -}}
{{- fail (printf "speaker.credentials lacks %q: cloudConfig.content's bgp.peers[%d].passwordFile names it, and with bgp.loadBalancers.announceFrom: nodes every node's speaker reads it (list it there)" $name $i) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The L2 speaker DaemonSet's pods: another app name, so the controller's selectors (its
Deployment, PodDisruptionBudget, Service and monitors) never take in speaker pods.
*/}}
{{- define "edge-ccm.speakerSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-speaker
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "edge-ccm.speakerLabels" -}}
{{ include "edge-ccm.speakerSelectorLabels" . }}
app.kubernetes.io/component: speaker
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "edge-ccm.speakerKeySecretName" -}}
{{- .Values.speaker.existingKeySecret | default (printf "%s-speaker-key" (include "edge-ccm.fullname" .)) -}}
{{- end -}}
