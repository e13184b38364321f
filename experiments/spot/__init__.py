"""The single-job spot mode's lab: scenarios (``scenario``), running them and comparing with Can't Be Late's runs
(``runs``), the savings-vs-slack figure (``figure``); ``capsim spot`` is its command. The shipped scenarios, traces
and reference runs sit next to this file (``ATTRIBUTION.md``)."""
