"""Triggers: what starts a run (cron, interval, webhook, file_watch, event, message, manual,
and the custom types a program registers).

Its names load on first use (PEP 562, the stub beside this file lists them): the trigger
registry (``register_trigger_type``, ``registered_trigger_types``,
``unregister_trigger_type``, where code written for the reference runtime imports them from),
the config, the event and the trigger classes."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
