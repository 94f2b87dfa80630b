"""Which stage runs on which node, and which edges between stages cross nodes.

Below validate (which checks a placement: E390, E391) and below k8s (which builds one pod per
node group); it knows stages, devices and connectors, nothing of Kubernetes.
"""
