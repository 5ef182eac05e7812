"""A URLconf without the JSON API (the admin only), for checks that apply only where the API is mounted."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
