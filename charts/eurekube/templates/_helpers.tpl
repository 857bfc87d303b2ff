{{/*
Names. With the release named "eurekube" every object has its name in
manifests/. The prefix is cut to 50 characters so that "<prefix>-webhook",
"<prefix>-manager" and the like stay valid names.
*/}}
{{- define "eurekube.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "eurekube.managerName" -}}{{ include "eurekube.fullname" . }}-manager{{- end -}}
{{- define "eurekube.webhookService" -}}{{ include "eurekube.fullname" . }}-webhook{{- end -}}
{{- define "eurekube.servingCertificate" -}}{{ include "eurekube.fullname" . }}-serving-cert{{- end -}}
{{- define "eurekube.servingSecret" -}}{{ include "eurekube.fullname" . }}-webhook-tls{{- end -}}
{{- define "eurekube.credentialsRole" -}}{{ include "eurekube.fullname" . }}-eureka-credentials{{- end -}}
{{- define "eurekube.podWritePolicy" -}}{{ include "eurekube.managerName" . }}-pod-writes{{- end -}}
{{- define "eurekube.importWritePolicy" -}}{{ include "eurekube.managerName" . }}-import-writes{{- end -}}
{{- define "eurekube.registrarPlacementPolicy" -}}{{ include "eurekube.managerName" . }}-registrar-placement{{- end -}}

{{/*
The RE2 regex of an image repository, whatever the tag or digest; a Docker
Hub repository with or without its domain (webhook/registrars.go,
imageRepository).
*/}}
{{- define "eurekube.repositoryRegex" -}}
{{- $first := splitList "/" . | first -}}
{{- if and (contains "/" .) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- /* A registry's domain is case-insensitive, as the webhook reads it. */ -}}
^(?i:{{ regexQuoteMeta $first }})/{{ splitList "/" . | rest | join "/" | regexQuoteMeta }}(:[\w][\w.-]*)?(@.+)?$
{{- else -}}
^((?i:docker\.io|index\.docker\.io|registry-1\.docker\.io)/)?{{ regexQuoteMeta . }}(:[\w][\w.-]*)?(@.+)?$
{{- end -}}
{{- end -}}
{{- define "eurekube.gatewayName" -}}{{ include "eurekube.fullname" . }}-gateway{{- end -}}
{{- define "eurekube.gatewayCredentialsSecret" -}}{{ default (printf "%s-eureka" (include "eurekube.gatewayName" .)) .Values.gateway.eurekaCredentials.secretName }}{{- end -}}
{{/* The audience of the tokens the gateway takes: its --audience, the manager's --gateway-audience, the manager's projected token's. */}}
{{- define "eurekube.gatewayAudience" -}}eurekube-gateway{{- end -}}
{{- define "eurekube.gatewayTokenDir" -}}/var/run/secrets/eurekube.io/gateway{{- end -}}

{{/* The gateway's URL, for the manager and the registrars. */}}
{{- define "eurekube.gatewayURL" -}}http://{{ include "eurekube.gatewayName" . }}.{{ .Release.Namespace }}.svc:8761/eureka{{- end -}}

{{/*
The manager's --eureka-url, a JSON list: manager.eurekaURLs, else the
gateway's URL when it is enabled (the manager and the registrars of
syncers that name no servers then write through it), else none.
*/}}
{{- define "eurekube.managerEurekaURLs" -}}
{{- $urls := .Values.manager.eurekaURLs -}}
{{- if and (not $urls) .Values.gateway.enabled -}}
{{- $urls = list (include "eurekube.gatewayURL" .) -}}
{{- end -}}
{{- toJson (default (list) $urls) -}}
{{- end -}}

{{/*
"true" when the manager's --eureka-url names the gateway: then it gets
--gateway-audience and its token (the manager sends the token, and the
webhook gives registrars theirs, for those servers alone).
*/}}
{{- define "eurekube.managerViaGateway" -}}
{{- if .Values.gateway.enabled -}}
{{- $self := printf "://%s([.:/]|$)" (include "eurekube.gatewayName" . | regexQuoteMeta) -}}
{{- range include "eurekube.managerEurekaURLs" . | fromJsonArray -}}
{{- if regexMatch $self . }}true{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The Eureka servers behind the gateway, a JSON list: gateway.eurekaURLs,
else manager.eurekaURLs (the servers the manager named before the
gateway), else the servers manifests/samples names, so that the gateway
starts (it needs a URL) and answers 503 naming them until they are set, as
manifests/gateway does. A manager URL that is the gateway's own would make
the gateway call itself: then gateway.eurekaURLs must name the servers.
*/}}
{{- define "eurekube.gatewayEurekaURLs" -}}
{{- $urls := .Values.gateway.eurekaURLs -}}
{{- if not $urls -}}
{{- $urls = .Values.manager.eurekaURLs -}}
{{- $self := printf "://%s([.:/]|$)" (include "eurekube.gatewayName" . | regexQuoteMeta) -}}
{{- range $urls -}}
{{- if regexMatch $self . -}}
{{- fail (printf "manager.eurekaURLs names the gateway (%s): set gateway.eurekaURLs to the real Eureka servers, which the gateway alone names" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $urls -}}
{{- $urls = list "http://eureka-0.eureka.eureka.svc:8761/eureka" "http://eureka-1.eureka.eureka.svc:8761/eureka" -}}
{{- end -}}
{{- toJson $urls -}}
{{- end -}}

{{- define "eurekube.uninstallName" -}}{{ include "eurekube.fullname" . }}-uninstall{{- end -}}

{{/*
Labels of every object: manifests/'s (name, part-of) and Helm's.
*/}}
{{- define "eurekube.labels" -}}
app.kubernetes.io/name: eurekube
app.kubernetes.io/part-of: eurekube
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
The manager pods' selector: the labels of manifests/, so that the
Deployment's immutable selector is the same however Eurekube was installed
(one Eurekube per cluster: the CRD and the webhook are cluster-wide).
*/}}
{{- define "eurekube.selectorLabels" -}}
app.kubernetes.io/name: eurekube
app.kubernetes.io/component: manager
{{- end -}}

{{/*
The gateway's pods' selector, and its objects' labels.
*/}}
{{- define "eurekube.gatewaySelectorLabels" -}}
app.kubernetes.io/name: eurekube
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "eurekube.gatewayLabels" -}}
{{ include "eurekube.labels" . }}
app.kubernetes.io/component: gateway
{{- end -}}

{{- define "eurekube.managerLabels" -}}
{{ include "eurekube.labels" . }}
app.kubernetes.io/component: manager
{{- end -}}

{{/*
An image reference from (list image root): the digest when set, else the
tag, which defaults to the chart's appVersion.
*/}}
{{- define "eurekube.image" -}}
{{- $image := index . 0 -}}
{{- $root := index . 1 -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
Namespaces the webhook is never called for and the manager never mutates:
the release's own (the manager must be able to start while no replica
answers), kube-system, then manager.excludedNamespaces. A JSON list.
*/}}
{{- define "eurekube.excludedNamespaces" -}}
{{- $ns := list .Release.Namespace "kube-system" -}}
{{- range .Values.manager.excludedNamespaces -}}
{{- if not (has . $ns) -}}{{- $ns = append $ns . -}}{{- end -}}
{{- end -}}
{{- toJson $ns -}}
{{- end -}}

{{/*
The Pod Security `restricted` contexts the manager, the gateway and the
uninstall Job share. No runAsUser, runAsGroup or fsGroup: the image's USER
is numeric (65532), which runAsNonRoot checks, and a platform that assigns
each namespace its own UIDs (OpenShift's restricted-v2) refuses a pod that
fixes one.
*/}}
{{- define "eurekube.podSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "eurekube.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "eurekube.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}
