"""Energy meters and the power state: hardware counters read at measurement boundaries.

meters.py (the EnergyMeter protocol; NVML, RAPL and a fake), accounting.py (joules per token of a
phase, the update-period rule, idle power), state.py (governor, clocks, power limit, EP performance
modes, AC/battery). Imports only support/, model/ and stats/; nothing here models power.
"""
