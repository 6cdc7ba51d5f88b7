"""PACS (Li et al., ICCV 2017): 9,991 images, 7 classes, 4 domains (art_painting 2,048, cartoon
2,344, photo 1,670, sketch 3,929), laid out ``<domain>/<class>/<image>`` as the usual release.

Sources (both verify the image, class and domain counts, since no checksum is published):

- ``pacs``: the zip DomainBed downloads from Google Drive (folder ``kfold/<domain>/<class>/``),
  fetched with pooch through Drive's direct-download URL; ``params.url`` points at a mirror and
  ``params.sha256`` pins a checksum (none by default). Google Drive may rate-limit or withdraw
  the file: then download it by hand and use ``pacs_local``.
- ``pacs_local``: a local folder ``params.path`` with the ``<domain>/<class>/`` layout (e.g. the
  unpacked ``kfold`` folder, or ../shared/data/pacs_sample).

Images are resized to ``params.image_size`` (default 224; bilinear, RGB). Every domain is split
evenly into ``params.clients_per_domain`` clients (default 5, TFL): its images, sorted by class
and file name, are dealt round-robin, so the clients' class mix matches the domain's. ``group``
is ``<domain>_<k>``: the ``groups`` partition with 4 x 5 = 20 clients makes the clients of
domain d (alphabetical order: art_painting, cartoon, photo, sketch) the ids 5d..5d+4.
Counts to verify: ``params.expected_images`` (default 9,991), ``expected_classes`` (7),
``expected_domains`` (4).
"""

from __future__ import annotations

from benchlib.data.domain_folders import DomainDataset, register_domain_dataset

PACS = DomainDataset(
    "pacs",
    9991,
    7,
    4,
    "PACS.zip",
    "https://drive.usercontent.google.com/download?id=1JFr8f805nMUelQWWmfnJR3y4_SYoN5Pd"
    "&export=download&confirm=t",
)


register_domain_dataset(PACS, "PACS: 4 domains x 7 classes, leave-one-domain-out (TFL)")
