"""The transport's side: envelope, REST paths, API versions, retry, errors, plans, cluster, plain values."""
