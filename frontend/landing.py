"""The site's front door (`/`): where researchers and annotators each go from here."""

from django.shortcuts import render
from django.views.decorators.http import require_GET

from crowdbench.security import annotator_page


@annotator_page(frameable=False)
@require_GET
def landing(request):
    return render(request, "landing.html")
