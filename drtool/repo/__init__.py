"""The repository: drtool's store format on top of a backend (chunks, manifests, key slots, config).

Layering (strict, top to bottom): repository -> crypto -> backend. Nothing below knows what is above.
The package itself imports nothing: importing one small module of it (``drtool.repo.times``) must not load
the whole store (NumPy, the chunker, the ciphers), which `drtool --help` would then pay for
(tests/unit/test_cli_startup.py). Import ``drtool.repo.repository.Repository``.
"""
