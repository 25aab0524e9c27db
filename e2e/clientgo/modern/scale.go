package main

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The scale subresource of a custom resource, as autoscalers and `kubectl scale` use it: a CRD
// with subresources.scale, then GET, PUT and a merge patch of .../scale through the dynamic
// client, each read back from the object's spec.replicas.
func scaleScenario(ctx context.Context, e *env) (string, error) {
	client, err := dynamic.NewForConfig(e.config)
	if err != nil {
		return "", err
	}
	group := e.namespace + ".scale.example.com"
	crds := client.Resource(schema.GroupVersionResource{
		Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": "pools." + group},
		"spec": map[string]interface{}{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]interface{}{"plural": "pools", "singular": "pool", "kind": "Pool"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]interface{}{
					"status": map[string]interface{}{},
					"scale": map[string]interface{}{
						"specReplicasPath":   ".spec.replicas",
						"statusReplicasPath": ".status.replicas",
					},
				},
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create the CRD: %w", err)
	}
	defer crds.Delete(context.Background(), "pools."+group, metav1.DeleteOptions{}) //nolint:errcheck
	pools := client.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "pools"}).
		Namespace(e.namespace)
	pool := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": group + "/v1", "kind": "Pool",
		"metadata": map[string]interface{}{"name": "p1"},
		"spec":     map[string]interface{}{"replicas": int64(2)},
	}}
	// A new CRD is served once it is established (at once here; a moment on kube-apiserver).
	deadline := time.Now().Add(e.timeout)
	for {
		_, err = pools.Create(ctx, pool, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return "", fmt.Errorf("create the custom resource: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	scale, err := pools.Get(ctx, "p1", metav1.GetOptions{}, "scale")
	if err != nil {
		return "", fmt.Errorf("GET scale: %w", err)
	}
	replicas, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	if scale.GetKind() != "Scale" || scale.GetAPIVersion() != "autoscaling/v1" || replicas != 2 {
		return "", fmt.Errorf("GET scale: %s %s spec.replicas %d (want autoscaling/v1 Scale, 2)",
			scale.GetAPIVersion(), scale.GetKind(), replicas)
	}
	if err := unstructured.SetNestedField(scale.Object, int64(5), "spec", "replicas"); err != nil {
		return "", err
	}
	if _, err := pools.Update(ctx, scale, metav1.UpdateOptions{}, "scale"); err != nil {
		return "", fmt.Errorf("PUT scale: %w", err)
	}
	if got, err := objectReplicas(ctx, pools); err != nil || got != 5 {
		return "", fmt.Errorf("after PUT scale: spec.replicas %d, %v (want 5)", got, err)
	}
	// The stale Scale again: its resourceVersion is the object's, now old.
	if _, err := pools.Update(ctx, scale, metav1.UpdateOptions{}, "scale"); !apierrors.IsConflict(err) {
		return "", fmt.Errorf("PUT of a stale scale: %v (want 409 Conflict)", err)
	}
	patch := []byte(`{"spec":{"replicas":7}}`)
	if _, err := pools.Patch(ctx, "p1", types.MergePatchType, patch, metav1.PatchOptions{}, "scale"); err != nil {
		return "", fmt.Errorf("PATCH scale: %w", err)
	}
	if got, err := objectReplicas(ctx, pools); err != nil || got != 7 {
		return "", fmt.Errorf("after PATCH scale: spec.replicas %d, %v (want 7)", got, err)
	}
	return "GET, PUT (409 when stale) and merge PATCH of .../scale write spec.replicas", nil
}

func objectReplicas(ctx context.Context, pools dynamic.ResourceInterface) (int64, error) {
	object, err := pools.Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	replicas, _, err := unstructured.NestedInt64(object.Object, "spec", "replicas")
	return replicas, err
}
