from .config import HttpServerConfig as HttpServerConfig
from .config import ServerConfig as ServerConfig
from .config import StdioServerConfig as StdioServerConfig
from .tools import McpTool as McpTool
from .tools import McpToolbox as McpToolbox
from .tools import McpToolFailed as McpToolFailed
