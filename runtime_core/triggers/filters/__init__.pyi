from .expression import EventFilter as EventFilter
from .expression import FilterExpressionError as FilterExpressionError
from .expression import compile_filter as compile_filter
from .expression import compile_state_check as compile_state_check
