package podrunner

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// resolveEnv computes a container's environment as the kubelet does:
// values in order, $(VAR) expanded from variables defined before, fieldRef
// from the pod, secretKeyRef and configMapKeyRef read from the API.
func resolveEnv(ctx context.Context, c client.Reader, pod *corev1.Pod, ctr *corev1.Container) ([]string, error) {
	seen := map[string]string{}
	var out []string
	for _, e := range ctr.Env {
		var value string
		switch {
		case e.ValueFrom == nil:
			value = varRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
				if v, ok := seen[ref[2:len(ref)-1]]; ok {
					return v
				}
				return ref
			})
		case e.ValueFrom.FieldRef != nil:
			v, err := fieldValue(pod, e.ValueFrom.FieldRef.FieldPath)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			value = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			var s corev1.Secret
			if err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &s); err != nil {
				return nil, fmt.Errorf("env %s: secret %s: %w", e.Name, ref.Name, err)
			}
			value = string(s.Data[ref.Key])
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			var cm corev1.ConfigMap
			if err := c.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &cm); err != nil {
				return nil, fmt.Errorf("env %s: configmap %s: %w", e.Name, ref.Name, err)
			}
			value = cm.Data[ref.Key]
		default:
			continue
		}
		seen[e.Name] = value
		out = append(out, e.Name+"="+value)
	}
	return out, nil
}

func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(key, "']")], nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(key, "']")], nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported by the pod runner", path)
}
