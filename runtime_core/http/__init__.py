"""What every HTTP server of ours keeps to (the webhook servers and the control API alike).

``limits`` (connection limits), ``guard`` (the listening sockets that enforce them), ``origin``
(Host and Origin checks), ``log_throttle`` (repeated warnings once per interval)."""
