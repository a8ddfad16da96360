"""Infrastructure as code for Sluice: the checkpoint/savepoint bucket and its access policies
(``s3_bucket``, ``policies``) and the Spark defaults a cluster needs (``spark-defaults.conf``).

Job configuration is not here: a deployment is one entry of ``dags/sluice_deployments.yaml``
(format in ``plugins/sluice/deployments.py``); ``tests/infra`` checks that the two agree."""
