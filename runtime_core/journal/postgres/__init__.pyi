from .fencing import JournalFenced as JournalFenced
from .journal import PostgresJournal as PostgresJournal
