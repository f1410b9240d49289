"""afford's version, in a module of its own: the package root is the public API's facade
(it imports the library on first use), so the library reads its version from here."""

__version__ = "0.1.0"
