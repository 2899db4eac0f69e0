"""AWS: the two services steps call, through boto3.

``ecr`` (describe images, page repositories, push times) and ``s3`` (put, get and list the backup
archives). Who it may import: docs/development.md (checked by tests/test_layering.py).
"""
