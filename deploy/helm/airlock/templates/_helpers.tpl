{{/*
The chart holds no manifests of its own: `base` is a link to deploy/base and
`cert-manager` one to deploy/overlays/cert-manager (`helm package` stores the files
themselves), and templates/objects.yaml renders the resources their kustomizations list,
as kustomize does: each object as its file has it, with the kustomizations' labels added
and the values applied to the few objects they change (the Deployments, the Namespace,
the webhook configurations, the ResourceQuota, the policy ConfigMap). A change to
deploy/base, or a file added to it and to its kustomization, needs nothing here.
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
{{- $resources := $container.resources | default dict -}}
{{- include "airlock.overlay" (list $resources ($settings.resources | default dict)) -}}
{{- $_ := set $container "resources" $resources -}}
{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "Deployment %s has no container %s for %s.resources" $name $component $component) -}}
{{- end -}}
{{- else if has $kind (list "MutatingWebhookConfiguration" "ValidatingWebhookConfiguration") -}}
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
The ConfigMap airlock-policies as JSON: what policies/kustomization.yaml's generator
makes of the files it names, with the values' files laid over them. The chart's policies/
is a link to the repository's; .helmignore leaves out all but the policy files and the
kustomization.
*/}}
{{- define "airlock.policies" -}}
{{- $kustomization := .Files.Get "policies/kustomization.yaml" | fromYaml -}}
{{- $generator := first $kustomization.configMapGenerator -}}
{{- if not (dig "options" "disableNameSuffixHash" false $generator) -}}
{{- fail "policies/kustomization.yaml: the chart renders airlock-policies without a name hash (disableNameSuffixHash)" -}}
{{- end -}}
{{- $files := dict -}}
{{- if .Values.defaultPolicies -}}
{{- range $file := $generator.files -}}
{{- $text := $.Files.Get (printf "policies/%s" $file) -}}
{{- if not $text -}}
{{- fail (printf "policies/%s is missing from the chart (or empty)" $file) -}}
{{- end -}}
{{- $_ := set $files (base $file) $text -}}
{{- end -}}
{{- end -}}
{{- range $name, $text := .Values.policies -}}
{{- $_ := set $files $name $text -}}
{{- end -}}
{{- if not $files -}}
{{- fail "no policy files: set defaultPolicies or give files in policies" -}}
{{- end -}}
{{- $metadata := dict "name" $generator.name "namespace" $kustomization.namespace -}}
{{- with dig "options" "labels" dict $generator -}}
{{- $_ := set $metadata "labels" . -}}
{{- end -}}
{{- toJson (dict "apiVersion" "v1" "kind" "ConfigMap" "metadata" $metadata "data" $files) -}}
{{- end -}}
