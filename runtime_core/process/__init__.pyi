from .core import ProcessHost as ProcessHost
from .core import TriggerStatus as TriggerStatus
from .process import AgentProcess as AgentProcess
from .status import ProcessStatus as ProcessStatus
