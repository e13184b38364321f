"""Embedded scenario files shipped as package data."""
