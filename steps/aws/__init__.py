"""AWS: the two services steps call, through botocore / boto3 — and, on the event path, ECR through
the standard library.

``ecr`` (describe images, page repositories, push times; :func:`ecr.make_client` picks the client),
``ecr_http`` (the lean ECR client of resolve-image and edit-kustomize: ECR's JSON protocol over
``http.client``, and when botocore must answer instead), ``credentials`` (the providers of botocore's
credential chain it reproduces: the environment's keys, web identity, the container endpoint),
``sts_http`` (STS's AssumeRoleWithWebIdentity for web identity, as botocore asks it), ``transport``
(what the two lean clients share: endpoint shape, botocore's retry constants, TLS), ``sigv4`` (AWS
Signature Version 4, as botocore signs) and ``s3`` (put, get and list the backup archives). Who it
may import: docs/development.md (checked by tests/test_layering.py).
"""
