"""afford: what can this box afford to train, and may this run start?

Measure a machine honestly, write a device certificate, and turn certificates into plans.
"""

__version__ = "0.1.0"
