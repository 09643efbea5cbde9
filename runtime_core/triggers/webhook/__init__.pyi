from .trigger import WebhookTrigger as WebhookTrigger
