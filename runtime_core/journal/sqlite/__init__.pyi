from .journal import SQLiteJournal as SQLiteJournal
from .lock import JournalLocked as JournalLocked
from .lock import JournalPathError as JournalPathError
from .schema import DamagedJournal as DamagedJournal
