from .config import TriggerDeliveryConfig as TriggerDeliveryConfig
from .dead_letters import DeadLetter as DeadLetter
from .dead_letters import DeadLetterReason as DeadLetterReason
from .queue import Delivery as Delivery
from .queue import EventHandler as EventHandler
