"""The HTTP control API: the server behind ``promptui serve`` and the ``RemoteControl`` client
that speaks to it. Both sides share the wire codec in ``wire.py``."""
