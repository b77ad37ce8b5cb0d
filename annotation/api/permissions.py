"""The API asks what the admin asks: a staff account sees and changes only what its model permissions allow."""

from rest_framework.permissions import DjangoModelPermissions

_VIEW = "%(app_label)s.view_%(model_name)s"


class ModelPermissions(DjangoModelPermissions):
    """DRF's model permissions, with reading needing the model's view permission as in the admin.

    DRF asks nothing for GET, so a staff account the admin refuses ("You don't have permission to
    view or edit anything") could otherwise read every row through the API.
    """

    perms_map = {
        **DjangoModelPermissions.perms_map,
        "GET": [_VIEW],
        "HEAD": [_VIEW],
        "OPTIONS": [_VIEW],
    }

    def has_permission(self, request, view):
        if not hasattr(view, request.method.lower()):
            # No handler: the view answers 405, which tells the client more than a 403.
            return True
        return super().has_permission(request, view)
