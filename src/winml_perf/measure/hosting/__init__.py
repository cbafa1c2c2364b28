"""Where a route's session lives while it is measured: in this process (``local``) or in a child of
its own (``isolate``), both driving one ``SessionHost`` and answering with the typed ``replies``.

May import: model/, session/, ep/ (the child's context), support/. Imported by the cell driver and
the schedules of measure/ only.
"""
