from .importer import ImportReport as ImportReport
from .importer import NothingToImport as NothingToImport
from .importer import ProcessImport as ProcessImport
from .importer import apply_import as apply_import
from .importer import import_into_file as import_into_file
from .importer import import_reference as import_reference
from .importer import prepare_import as prepare_import
