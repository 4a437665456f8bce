"""The numpy fast lanes of the hottest conversions, bit-identical to the engine (their reference).

Imported only by ``core.engine.convert``; imports ``core.formats`` and the base modules.
"""
