"""Predict images with an exported model, without torch: ``python deploy/python/infer.py --model-dir EXPORT_DIR
-i IMAGE_OR_DIR -o OUT_DIR``, the ``oars-infer`` command of ``pip install deploy/python`` run from a checkout.

Run as a script, Python puts this folder first on ``sys.path``, which is where the ``oars_deploy`` package lives,
so no path edit is needed; see ``oars_deploy/cli.py`` for the options.
"""

from oars_deploy.cli import main

if __name__ == "__main__":
    main()
