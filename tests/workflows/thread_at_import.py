"""Starts a thread when imported (what a zygote must refuse to fork from)."""

import threading

_STOP = threading.Event()
threading.Thread(target=_STOP.wait, name="started-by-import", daemon=True).start()
