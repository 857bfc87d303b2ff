// Package webhooktest holds the pods the webhook's own tests, benchmarks
// and `make bench` share, so that every figure is about the same pod.
package webhooktest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SpringBootPod is the pod the webhook mutates most often: a Spring Boot
// app of app=orders serving port "http" (8080) with a readinessProbe on
// the actuator. An empty name leaves it to the API server (generateName
// "orders-").
func SpringBootPod(namespace, name string) *corev1.Pod {
	meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "orders"}}
	if name == "" {
		meta.GenerateName = "orders-"
	}
	return &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "orders",
				Image: "registry.example/orders:1.4.2",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/actuator/health", Port: intstr.FromString("http")}},
					PeriodSeconds:    5,
					FailureThreshold: 3,
				},
			}},
		},
	}
}
