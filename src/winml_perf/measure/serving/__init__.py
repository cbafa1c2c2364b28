"""Serving under load (``winml serve``): the load loop over a server (``loop``: closed loop, open
loop with Poisson arrivals), the measuring child that loads a route and serves its load points
(``child``), and the run over routes and invocations that builds and stores the cells (``run``).

May import: results and the floors below it, as measure/ does.
"""
