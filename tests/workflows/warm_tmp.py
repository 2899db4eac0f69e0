"""Asks ``tempfile`` for its directory at import time, as a library may (see ``show_tmp``)."""

import tempfile

AT_IMPORT = tempfile.gettempdir()
