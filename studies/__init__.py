"""Studies run from the checkout (``python -m studies.NAME``): scripts that reproduce a page of ``docs/`` or a
published comparison, writing into the checkout; not part of the installed package."""
