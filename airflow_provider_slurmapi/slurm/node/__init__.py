"""What runs on the cluster's node: the supervisor of a wrapped script. The provider never imports it."""
