"""A cell's energy while it is measured (a sub-room of measure/): the phase readings of each batch,
the record's energy section with the power state and its comparison between routes, and the
timeline of a sustained run. Imports power/, model/ and measure/'s own hosting replies.
"""
