"""Compiled (EPContext) stages: compiling them (on a device or device-free), the gate that fails a route
whose compile failed, whether a compiled stage is fit to reuse here, and prepared routes that travel
between machines.

May import: bundle/ (config, cache), ep/, session/, model/, onnxfile/, support/.
"""
