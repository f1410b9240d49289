"""Versioned file formats (docs/DESIGN.md section 5): one schema per file kind, each with an id.

Loading reads the ``schema`` field first: a known older id is upgraded through an explicit
migration function; an unknown id or a malformed file is an :class:`~afford.core.errors.InputError`.
"""

from afford.schema.cert import CERT_SCHEMA, Certificate, load_certificate, save_certificate

__all__ = ["CERT_SCHEMA", "Certificate", "load_certificate", "save_certificate"]
