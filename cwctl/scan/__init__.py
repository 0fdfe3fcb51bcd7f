"""A scan's data: what is asked (``request``, ``budgets``), what comes back
(``collection``, kept on disk by ``recordfile``; the paths between scans in
``pathcache``) and what the analysis makes of it (``snapshot``)."""
