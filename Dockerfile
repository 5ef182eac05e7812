# The image behind every app service of docker-compose.yml (web, worker, beat).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY requirements.txt pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
# Static files (the admin's CSS and the tree page's assets) are baked into the image;
# a reverse proxy serves /app/staticfiles at /static/.
RUN DJANGO_DEBUG=true python manage.py collectstatic --noinput \
    && useradd --create-home --uid 1000 app \
    && mkdir -p /app/media \
    && chown app /app/media
USER app
EXPOSE 8000
CMD ["gunicorn", "project.wsgi:application", "--bind", "0.0.0.0:8000", "--access-logfile", "-"]
