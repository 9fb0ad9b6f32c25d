"""PE code, the language between the compiler and the simulator: its IR (:mod:`pe.ir`),
printer, parser and grammar, walks over its expressions, and the fabric configuration
both cost it with (``docs/pecode.md``). It sits below both: ``codegen`` emits it,
``pesim`` reads and runs it, and it imports neither."""
