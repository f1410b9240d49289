"""Renderers: from typed, tagged results to text. They format; they never compute."""
