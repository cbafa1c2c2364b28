"""A series of runs over time: change points (E-Divisive means), per-run levels that do not inherit
process modes, the size of a step with its exact interval, and the first-night band of the gate.
Pure functions over arrays, like the rest of stats/.
"""
