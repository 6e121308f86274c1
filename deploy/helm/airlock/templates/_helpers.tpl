{{/*
The chart holds no manifests of its own: `base` is a link to deploy/base and
`cert-manager` one to deploy/overlays/cert-manager (`helm package` stores the files
themselves), and templates/objects.yaml renders the resources their kustomizations list,
as kustomize does: each object as its file has it, with the kustomizations' labels added
and the values applied to the few objects they change (the Deployments, the Namespace,
the webhook configurations, the ResourceQuota, the policy ConfigMap). A change to
deploy/base, or a file added to it and to its kustomization, needs nothing here.
`observability` links to deploy/observability, whose objects the values switch on.
tests/e2e/test_chart.py diffs what the chart renders against `kubectl kustomize`.
*/}}

{{/* The image both Deployments run: by digest when one is given. */}}
{{- define "airlock.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{ $image.repository }}@{{ $image.digest }}
{{- else -}}
{{ $image.repository }}:{{ $image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
(list ROOT PATH): the objects of the chart's YAML file PATH, each document parsed, as a
JSON list (fromJsonArray it). Documents of comments alone are left out.
*/}}
{{- define "airlock.read" -}}
{{- $path := index . 1 -}}
{{- $text := (index . 0).Files.Get $path -}}
{{- if not $text -}}
{{- fail (printf "%s is missing from the chart (or empty)" $path) -}}
{{- end -}}
{{- $objects := list -}}
{{- range $document := regexSplit "(?m)^---[ \\t]*$" $text -1 -}}
{{- $object := fromYaml $document -}}
{{- if hasKey $object "Error" -}}
{{- fail (printf "%s: %s" $path $object.Error) -}}
{{- end -}}
{{- if $object -}}
{{- $objects = append $objects $object -}}
{{- end -}}
{{- end -}}
{{- toJson $objects -}}
{{- end -}}

{{/*
A kustomization's `labels`, as JSON: what kustomize adds to each object's
metadata.labels. The chart writes them nowhere else, so it refuses the options that
would have kustomize add them to selectors or pod templates too.
*/}}
{{- define "airlock.labels" -}}
{{- $labels := dict -}}
{{- range .labels -}}
{{- if or .includeSelectors .includeTemplates -}}
{{- fail "a kustomization's labels include selectors or templates: the chart adds labels to metadata only" -}}
{{- end -}}
{{- $labels = mergeOverwrite $labels (.pairs | default dict) -}}
{{- end -}}
{{- toJson $labels -}}
{{- end -}}

{{/*
(list MAP OVER): lays OVER onto MAP key by key, changing MAP: a map goes into the map of
the same key, a null removes the key (`--set controller.resources.limits.cpu=null`),
anything else replaces it.
*/}}
{{- define "airlock.overlay" -}}
{{- $map := index . 0 -}}
{{- range $key, $value := index . 1 -}}
{{- if kindIs "invalid" $value -}}
{{- $_ := unset $map $key -}}
{{- else if and (kindIs "map" $value) (kindIs "map" (index $map $key)) -}}
{{- include "airlock.overlay" (list (index $map $key) $value) -}}
{{- else -}}
{{- $_ := set $map $key $value -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
(list OBJECT KEY OVER): lays OVER onto the map at OBJECT's KEY as airlock.overlay does,
making that map if OBJECT has none and removing it if nothing is left: an empty value
renders nothing, as deploy/base has it.
*/}}
{{- define "airlock.overlayAt" -}}
{{- $object := index . 0 -}}
{{- $key := index . 1 -}}
{{- $map := index $object $key | default dict -}}
{{- include "airlock.overlay" (list $map (index . 2 | default dict)) -}}
{{- if $map -}}
{{- $_ := set $object $key $map -}}
{{- else -}}
{{- $_ := unset $object $key -}}
{{- end -}}
{{- end -}}

{{/*
MAP as JSON with each value a string, as labels and annotations must be (`--set
podAnnotations.example\.com/port=8080` reads a number); a null stays null.
*/}}
{{- define "airlock.strings" -}}
{{- $strings := dict -}}
{{- range $key, $value := . | default dict -}}
{{- $_ := set $strings $key (ternary $value (toString $value) (kindIs "invalid" $value)) -}}
{{- end -}}
{{- toJson $strings -}}
{{- end -}}

{{/*
(list OBJECT KEY ITEMS): appends ITEMS to the list at OBJECT's KEY, making it if OBJECT
has none; no ITEMS, no list.
*/}}
{{- define "airlock.appendAt" -}}
{{- $object := index . 0 -}}
{{- $key := index . 1 -}}
{{- $items := index . 2 | default list -}}
{{- if $items -}}
{{- $_ := set $object $key (concat (index $object $key | default list) $items) -}}
{{- end -}}
{{- end -}}

{{/*
(dict "root" ROOT "object" OBJECT "images" IMAGES): applies the values to a base object,
changing it; renders "omit" for an object the values leave out. IMAGES are the base
kustomization's `images:` names, the containers whose image the chart sets as kustomize's
images transformer does.
*/}}
{{- define "airlock.valued" -}}
{{- $values := .root.Values -}}
{{- $object := .object -}}
{{- $kind := $object.kind -}}
{{- $name := $object.metadata.name -}}
{{- $pod := dig "spec" "template" "spec" dict $object -}}
{{- range $container := concat ($pod.containers | default list) ($pod.initContainers | default list) -}}
{{- if has (regexReplaceAll "(:[^:/]*)?(@.*)?$" $container.image "") $.images -}}
{{- $_ := set $container "image" (include "airlock.image" $.root) -}}
{{- $_ := set $container "imagePullPolicy" $values.image.pullPolicy -}}
{{- end -}}
{{- end -}}
{{- if and (eq $kind "Namespace") (not $values.namespace.create) -}}
omit
{{- else if and (eq $kind "Deployment") (has $name (list "airlock-webhook" "airlock-controller")) -}}
{{- /* webhook.* and controller.*; resources go to the container of the same name. */ -}}
{{- $component := trimPrefix "airlock-" $name -}}
{{- $settings := index $values $component -}}
{{- if not (kindIs "invalid" $settings.replicas) -}}
{{- $_ := set $object.spec "replicas" $settings.replicas -}}
{{- end -}}
{{- $found := false -}}
{{- range $container := $pod.containers -}}
{{- if eq $container.name $component -}}
{{- $found = true -}}
{{- include "airlock.overlayAt" (list $container "resources" $settings.resources) -}}
{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "Deployment %s has no container %s for %s.resources" $name $component $component) -}}
{{- end -}}
{{- /* Where the pods run, and what is added to them: maps laid over the base's, key by
key; lists after the base's items. */ -}}
{{- include "airlock.overlayAt" (list $pod "nodeSelector" $settings.nodeSelector) -}}
{{- include "airlock.overlayAt" (list $pod "affinity" $settings.affinity) -}}
{{- include "airlock.appendAt" (list $pod "tolerations" $settings.tolerations) -}}
{{- include "airlock.appendAt" (list $pod "imagePullSecrets" $values.imagePullSecrets) -}}
{{- $podMetadata := $object.spec.template.metadata -}}
{{- range $label, $_ := $settings.podLabels | default dict -}}
{{- if hasKey $podMetadata.labels $label -}}
{{- fail (printf "%s.podLabels.%s: deploy/base sets this label on the pods, and Services, PodDisruptionBudgets and NetworkPolicies select them by such labels; podLabels may only add labels" $component $label) -}}
{{- end -}}
{{- end -}}
{{- include "airlock.overlayAt" (list $podMetadata "labels" (include "airlock.strings" $settings.podLabels | fromJson)) -}}
{{- include "airlock.overlayAt" (list $podMetadata "annotations" (include "airlock.strings" $settings.podAnnotations | fromJson)) -}}
{{- else if has $kind (list "MutatingWebhookConfiguration" "ValidatingWebhookConfiguration") -}}
{{- /* mutatingWebhook.* and validatingWebhook.*, checked as the API would check them. */ -}}
{{- $option := ternary "mutatingWebhook" "validatingWebhook" (eq $kind "MutatingWebhookConfiguration") -}}
{{- $hook := index $values $option -}}
{{- range $webhook := $object.webhooks -}}
{{- with $hook.failurePolicy -}}
{{- if not (has . (list "Ignore" "Fail")) -}}
{{- fail (printf "%s.failurePolicy is %v: Ignore or Fail" $option .) -}}
{{- end -}}
{{- $_ := set $webhook "failurePolicy" . -}}
{{- end -}}
{{- if not (kindIs "invalid" $hook.timeoutSeconds) -}}
{{- $seconds := int $hook.timeoutSeconds -}}
{{- if or (ne (toString $seconds) (toString $hook.timeoutSeconds)) (lt $seconds 1) (gt $seconds 30) -}}
{{- fail (printf "%s.timeoutSeconds is %v: a whole number of seconds from 1 to 30" $option $hook.timeoutSeconds) -}}
{{- end -}}
{{- $_ := set $webhook "timeoutSeconds" $seconds -}}
{{- end -}}
{{- end -}}
{{- /* What deploy/overlays/no-cert-manager patches out, and the caBundle in its place. */ -}}
{{- if not $values.certManager.enabled -}}
{{- $annotations := $object.metadata.annotations | default dict -}}
{{- $_ := unset $annotations "cert-manager.io/inject-ca-from" -}}
{{- if not $annotations -}}
{{- $_ := unset $object.metadata "annotations" -}}
{{- end -}}
{{- end -}}
{{- $caBundle := $values.webhook.caBundle -}}
{{- if $caBundle -}}
{{- range $webhook := $object.webhooks -}}
{{- $_ := set $webhook.clientConfig "caBundle" $caBundle -}}
{{- end -}}
{{- end -}}
{{- else if and (eq $kind "ResourceQuota") (eq $name "airlock-critical-pods") -}}
{{- include "airlock.overlay" (list $object.spec.hard $values.resourceQuota.hard) -}}
{{- end -}}
{{- end -}}

{{/*
(list ROOT DIR KUSTOMIZATION GENERATOR): the ConfigMap that GENERATOR, an entry of the
configMapGenerator of the chart's DIR/kustomization.yaml, makes of the files it names (each
under its base name), as JSON; KUSTOMIZATION's namespace is its namespace.
*/}}
{{- define "airlock.generated" -}}
{{- $root := index . 0 -}}
{{- $dir := index . 1 -}}
{{- $generator := index . 3 -}}
{{- if not (dig "options" "disableNameSuffixHash" false $generator) -}}
{{- fail (printf "%s/kustomization.yaml: the chart renders %s without a name hash (disableNameSuffixHash)" $dir $generator.name) -}}
{{- end -}}
{{- $files := dict -}}
{{- range $file := $generator.files -}}
{{- $text := $root.Files.Get (printf "%s/%s" $dir $file) -}}
{{- if not $text -}}
{{- fail (printf "%s/%s is missing from the chart (or empty)" $dir $file) -}}
{{- end -}}
{{- $_ := set $files (base $file) $text -}}
{{- end -}}
{{- $metadata := dict "name" $generator.name "namespace" (index . 2).namespace -}}
{{- with dig "options" "labels" dict $generator -}}
{{- $_ := set $metadata "labels" . -}}
{{- end -}}
{{- toJson (dict "apiVersion" "v1" "kind" "ConfigMap" "metadata" $metadata "data" $files) -}}
{{- end -}}

{{/*
The ConfigMap airlock-policies as JSON: what policies/kustomization.yaml's generator
makes of the files it names, with the values' files laid over them. The chart's policies/
is a link to the repository's; .helmignore leaves out all but the policy files and the
kustomization.
*/}}
{{- define "airlock.policies" -}}
{{- $kustomization := .Files.Get "policies/kustomization.yaml" | fromYaml -}}
{{- $configMap := include "airlock.generated" (list . "policies" $kustomization (first $kustomization.configMapGenerator)) | fromJson -}}
{{- if not .Values.defaultPolicies -}}
{{- $_ := set $configMap "data" dict -}}
{{- end -}}
{{- range $name, $text := .Values.policies -}}
{{- $_ := set $configMap.data $name $text -}}
{{- end -}}
{{- if not $configMap.data -}}
{{- fail "no policy files: set defaultPolicies or give files in policies" -}}
{{- end -}}
{{- toJson $configMap -}}
{{- end -}}
