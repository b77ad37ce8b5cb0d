from django.apps import AppConfig
from django.db.backends.signals import connection_created


class AnnotationConfig(AppConfig):
    name = "annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from annotation.audit import register_researcher_models
        from annotation.group_scope import scope_group_owned_models
        from annotation.sql import register_sqlite_median

        register_researcher_models()
        scope_group_owned_models()

        connection_created.connect(register_sqlite_median, dispatch_uid="annotation_sqlite_median")
